"""Best known kernels of bundled targets (package data): `autogk init --example NAME --start best`
starts from `<NAME>/kernel.py`; `<NAME>/SOURCE.md` says which run found it and how it was judged."""

"""Bundled kernel targets (package data): `autogk init --example NAME` copies one."""

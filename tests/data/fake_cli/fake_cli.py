"""Stands in for a coding CLI (`claude -p`, `codex exec`): edits files in the current directory.

Its behaviour comes from FAKE_CLI_ACTIONS (JSON): a list of [action, path, *args]:
    ["replace", path, old, new]   edit a file
    ["write", path, text]         create or overwrite a file
    ["hypothesis", text]          write the hypothesis where autogk asked for it
    ["say", text]                 print a line
    ["exit", code]                exit with that code
    ["sleep", seconds]            wait (to be interrupted)
    ["sh", command]               run a shell command (an agent reaching outside its files)
It also copies the prompt it received to FAKE_CLI_PROMPT_COPY when that is set.
"""
import json
import os
import sys
from pathlib import Path

prompt = sys.argv[-1]
if os.environ.get("FAKE_CLI_PROMPT_COPY"):
    Path(os.environ["FAKE_CLI_PROMPT_COPY"]).write_text(prompt)
for action, *args in json.loads(os.environ.get("FAKE_CLI_ACTIONS", "[]")):
    if action == "replace":
        p = Path(args[0])
        p.write_text(p.read_text().replace(args[1], args[2]))
    elif action == "write":
        Path(args[0]).parent.mkdir(parents=True, exist_ok=True)
        Path(args[0]).write_text(args[1])
    elif action == "hypothesis":
        Path(os.environ["AUTOGK_HYPOTHESIS_FILE"]).write_text(args[0] + "\n")
    elif action == "say":
        print(args[0])
    elif action == "sleep":
        import time
        print("sleeping", flush=True)
        Path(os.environ["AUTOGK_HYPOTHESIS_FILE"]).with_name("sleeping").write_text("1")
        time.sleep(float(args[0]))
    elif action == "sh":
        import subprocess
        subprocess.run(args[0], shell=True, check=False)
    elif action == "exit":
        print("failing as asked", file=sys.stderr)
        sys.exit(int(args[0]))

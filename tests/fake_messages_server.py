"""A stand-in for the Anthropic Messages API on 127.0.0.1: real HTTP, scripted answers.

    with FakeMessages([tool_use("read_file", {"path": "kernels/scale/kernel.py"}), error(429), finish("...")]) as srv:
        os.environ["ANTHROPIC_BASE_URL"] = srv.url

Each POST /v1/messages takes the next step of the script: a message body (dict), an error
(status, headers, body), a delay, or a callable(request_json) -> step (for endless scripts).
Every request is recorded (headers and JSON) for the test to inspect.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

_ids = itertools.count(1)


def message(content: list[dict[str, Any]], stop_reason: str = "tool_use", input_tokens: int = 1000,
            output_tokens: int = 100, **usage: int) -> dict[str, Any]:
    return {"id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant", "model": "fake",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens, **usage}}


def tool_use(name: str, input: Any, text: str | None = None, **kw: int) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": input})
    return message(content, **kw)


def text(t: str, **kw: int) -> dict[str, Any]:
    return message([{"type": "text", "text": t}], stop_reason="end_turn", **kw)


def finish(hypothesis: str, rationale: str = "", **kw: int) -> dict[str, Any]:
    return tool_use("finish", {"hypothesis": hypothesis, "rationale": rationale}, **kw)


def error(status: int, retry_after: float | None = 0.01) -> dict[str, Any]:
    kind = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 400: "invalid_request_error",
            401: "authentication_error"}.get(status, "api_error")
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return {"_status": status, "_headers": headers,
            "_body": {"type": "error", "error": {"type": kind, "message": f"fake {status}"}}}


def delay(seconds: float, then: dict[str, Any]) -> dict[str, Any]:
    return {"_delay": seconds, "_then": then}


def invalid(message: str) -> dict[str, Any]:
    return {"_status": 400, "_headers": {},
            "_body": {"type": "error", "error": {"type": "invalid_request_error", "message": message}}}


def validate(body: dict[str, Any]) -> str | None:
    """The request rules of the real API that a client most easily breaks; None when the request is fine."""
    msgs = body.get("messages")
    if not body.get("model") or not isinstance(body.get("max_tokens"), int) or not isinstance(msgs, list) or not msgs:
        return "model, max_tokens and a non-empty messages list are required"
    for i, m in enumerate(msgs):
        if m.get("role") != ("user" if i % 2 == 0 else "assistant"):
            return f"messages.{i}: roles must alternate, starting with user"
    for i, m in enumerate(msgs[:-1]):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        ids = {b["id"] for b in m["content"] if b.get("type") == "tool_use"}
        nxt = msgs[i + 1]["content"]
        got = {b.get("tool_use_id") for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"} \
            if isinstance(nxt, list) else set()
        if ids != got:
            return f"messages.{i + 1}: each tool_use needs exactly one tool_result (missing {ids - got})"
    blocks = [b for m in msgs if isinstance(m["content"], list) for b in m["content"]]
    blocks += body.get("system") if isinstance(body.get("system"), list) else []
    if sum(isinstance(b, dict) and "cache_control" in b for b in blocks) > 4:
        return "at most 4 blocks may have cache_control"
    for t in body.get("tools") or []:
        if not t.get("name") or t.get("input_schema", {}).get("type") != "object":
            return f"tool {t.get('name')}: input_schema must be an object schema"
    return None


class FakeMessages:
    def __init__(self, script: list[Any] | Callable[[dict[str, Any]], Any]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    problem = validate(body)
                    step = invalid(problem) if problem else outer._next(body)
                while isinstance(step, dict) and "_delay" in step:
                    time.sleep(step["_delay"])
                    step = step["_then"]
                status = step.get("_status", 200)
                payload = json.dumps(step.get("_body", step)).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for k, v in step.get("_headers", {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _next(self, body: dict[str, Any]) -> Any:
        if callable(self.script):
            return self.script(body)
        if not self.script:
            return error(400, None) | {"_body": {"type": "error", "error": {
                "type": "invalid_request_error", "message": "fake server: script exhausted"}}}
        return self.script.pop(0)

    def __enter__(self) -> "FakeMessages":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def tool_results(self, i: int) -> list[dict[str, Any]]:
        """The tool_result blocks of request i (0-based)."""
        last = self.requests[i]["messages"][-1]
        return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


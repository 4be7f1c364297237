"""Interactive use: a JupyterLab server started from the installed environment lists the notebooks and runs one
(``positions``, smoke profile) cell by cell through its ``python3`` kernel, over the server's own REST and
websocket API (what the browser does when a user steps through a notebook)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from repro.distributed import free_port

REPO = Path(__file__).resolve().parents[1]
TOKEN = uuid.uuid4().hex


def _get(base: str, path: str, method: str = "GET", body: dict | None = None) -> dict | list:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", method=method, data=data,
                                 headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jupyter lab`` from this environment's scripts folder, rooted at the repo, on a free port."""
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.exists(), f"{jupyter} missing: jupyterlab is in requirements.txt"
    port = free_port()
    home = tmp_path_factory.mktemp("jupyter_home")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_DATA_DIR": str(home / "data"),
           "JUPYTER_CONFIG_DIR": str(home / "config"), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([str(jupyter), "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
                             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={REPO}",
                             "--ServerApp.open_browser=False", *(["--allow-root"] if os.geteuid() == 0 else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            _get(base, "/api/status")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"jupyter lab did not start:\n{proc.stdout.read()[-3000:]}")
            time.sleep(0.5)
    yield base, port
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_the_server_lists_every_notebook_and_has_a_python3_kernel(server):
    base, _ = server
    listing = _get(base, "/api/contents/notebooks")
    names = sorted(e["name"] for e in listing["content"] if e["type"] == "notebook")
    assert names == sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")) and len(names) >= 6
    specs = _get(base, "/api/kernelspecs")
    assert "python3" in specs["kernelspecs"]


async def _run_cells(port: int, kernel_id: str, cells: list[str], timeout: float) -> list[dict]:
    """Each code cell as one ``execute_request`` on the kernel's websocket; returns the replies' contents."""
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={TOKEN}")
    session, replies = uuid.uuid4().hex, []
    try:
        for code in cells:
            msg_id = uuid.uuid4().hex
            ws.write_message(json.dumps({
                "header": {"msg_id": msg_id, "username": "test", "session": session, "msg_type": "execute_request",
                           "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            while True:
                raw = await asyncio.wait_for(ws.read_message(), timeout)
                assert raw is not None, "the kernel's websocket closed"
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "execute_reply":
                    replies.append(msg["content"])
                    break
            if replies[-1]["status"] != "ok":
                break
    finally:
        ws.close()
    return replies


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_notebook_runs_through_the_servers_python3_kernel(server, tmp_path):
    """The positions notebook, its parameters cell set to the smoke profile and temporary folders, every code
    cell executed in order: all replies ``ok``, and the notebook's figures and index entries written."""
    base, port = server
    nb = _get(base, "/api/contents/notebooks/positions.ipynb")["content"]
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in cells[0]["metadata"].get("tags", [])
    params = (f"profile = 'smoke'\nrun_dir = {str(tmp_path / 'runs')!r}\nfigures_dir = {str(tmp_path / 'fig')!r}\n"
              "force = False\npaper = 'all'\n")
    code = [f"import os\nos.chdir({str(REPO / 'notebooks')!r})", "".join(cells[0]["source"]), params]
    code += ["".join(c["source"]) for c in cells[1:]]
    kernel = _get(base, "/api/kernels", "POST", {"name": "python3"})
    try:
        replies = asyncio.run(_run_cells(port, kernel["id"], code, timeout=300))
    finally:
        _get(base, f"/api/kernels/{kernel['id']}", "DELETE")
    bad = [r for r in replies if r["status"] != "ok"]
    assert not bad, f"{bad[0].get('ename')}: {bad[0].get('evalue')}"
    assert len(replies) == len(code)
    index = json.loads((tmp_path / "fig" / "index.json").read_text())
    assert index and all(row["profile"] == "smoke" for row in index.values())
    files = [f for row in index.values() for f in row["files"]]
    assert files and all((tmp_path / "fig" / f).exists() for f in files)
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)

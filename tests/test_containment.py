"""Containment pieces on real processes: cgroup limits (the machine's own cgroups) and the allow-list proxy with its
in-sandbox bridge (real bwrap, real servers on 127.0.0.1 outside the sandbox)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daintree_tui.core import allow_list, limits, net_bridge, netproxy

needs_cgroups = pytest.mark.skipif(limits.choose_backend()[0] is None and not os.environ.get("CI"),
                                   reason="no cgroup backend here (CI has cgroup v1 as root)")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="no bwrap")


def test_sizes_and_limits_parse() -> None:
    assert limits.parse_size("4G") == 4 << 30
    assert limits.parse_size("512M") == 512 << 20
    assert limits.parse_size("1.5GiB") == int(1.5 * (1 << 30))
    for bad in ("lots", True, "12", -1):
        with pytest.raises(limits.LimitsError):
            limits.parse_size(bad)
    parsed = limits.parse_limits({"memory": "2G", "pids": 64, "cpu": 0.5}, "sandbox")
    assert parsed == limits.Limits(2 << 30, 64, 0.5)
    assert parsed.lowest(limits.Limits(memory=1 << 30, cpu=2.0)) == limits.Limits(1 << 30, 64, 0.5)
    with pytest.raises(limits.LimitsError, match=r"sandbox\.pids"):
        limits.parse_limits({"pids": 0}, "sandbox")
    with pytest.raises(limits.LimitsError, match=r"agents\.x\.cpu"):
        limits.parse_limits({"cpu": "two"}, "agents.x")


@pytest.fixture
def backend() -> Iterator[limits.Backend]:
    chosen, why = limits.choose_backend()
    if chosen is None:
        pytest.fail(f"no cgroup backend: {why}")
    yield chosen


def _run_limited(backend: limits.Backend, lim: limits.Limits, argv: list[str],
                 **kw: object) -> tuple[subprocess.CompletedProcess[str], str | None]:
    group = backend.create(limits.group_name("test", "run"), lim)
    done = subprocess.run(limits.prefix_for(backend, group, lim) + argv, capture_output=True, text=True,
                          timeout=60, **kw)  # type: ignore[call-overload]
    return done, limits.remove(backend, group, wait_s=5)


@needs_cgroups
def test_memory_hog_is_killed_inside_its_group(backend: limits.Backend) -> None:
    done, reason = _run_limited(backend, limits.Limits(memory=64 << 20),
                                ["sh", "-c", f"{sys.executable} -c 'x = bytearray(400 << 20)'; echo rc=$?"])
    assert "rc=137" in done.stdout
    assert reason == "oom-killed"


@needs_cgroups
def test_fork_bomb_meets_its_pids_limit_and_the_group_goes(backend: limits.Backend) -> None:
    group = backend.create(limits.group_name("test", "bomb"), limits.Limits(pids=16))
    bomb = subprocess.Popen([*limits.prefix_for(backend, group, limits.Limits(pids=16)),
                             "sh", "-c", "for i in $(seq 200); do sleep 30 & done; wait"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # A neighbour outside the group still answers at once.
        started = time.monotonic()
        assert subprocess.run(["echo", "alive"], capture_output=True, text=True).stdout == "alive\n"
        assert time.monotonic() - started < 1.0
        deadline = time.monotonic() + 20
        while backend.reason(group) != "pids limit" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.reason(group) == "pids limit"
    finally:
        for folder in group.folders:
            for pid in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        bomb.wait(10)
    assert limits.remove(backend, group, wait_s=5) == "pids limit"
    assert all(not folder.exists() for folder in group.folders)


@needs_cgroups
def test_cpu_half_a_core_holds_a_busy_loop_near_half(backend: limits.Backend) -> None:
    script = ("import time, os\nend = time.monotonic() + 2.0\nwhile time.monotonic() < end: pass\n"
              "t = os.times(); print(t.user + t.system)")
    done, _ = _run_limited(backend, limits.Limits(cpu=0.5), [sys.executable, "-c", script])
    used = float(done.stdout.strip())
    # At most half a core of its 2 s (with a period's rounding); on a busy machine it may get less, never more.
    assert 0.05 < used <= 1.15, used


@needs_cgroups
def test_a_group_a_kill_left_is_swept(backend: limits.Backend) -> None:
    group = backend.create(limits.group_name("test", "left"), limits.Limits(pids=8))
    assert group.name in [g.name for g in backend.groups()]
    assert group.name not in limits.sweep(backend, min_age_s=3600)  # young: a command may be joining it
    assert group.name in limits.sweep(backend, min_age_s=0)
    assert all(not folder.exists() for folder in group.folders)


def test_allow_list_rules() -> None:
    rules = allow_list.parse_rules(["api.anthropic.com", "127.0.0.1:8080", "[::1]:9000", "Example.COM:443"])
    assert allow_list.admitted(rules, "api.anthropic.com", 443)
    assert allow_list.admitted(rules, "API.anthropic.com.", 80)
    assert allow_list.admitted(rules, "127.0.0.1", 8080)
    assert not allow_list.admitted(rules, "127.0.0.1", 8081)
    assert allow_list.admitted(rules, "::1", 9000)
    assert allow_list.admitted(rules, "example.com", 443)
    assert not allow_list.admitted(rules, "example.com", 80)
    assert not allow_list.admitted(rules, "evil.api.anthropic.com", 443)
    for bad in ("http://x", "a b", "host:port", "[::1", "x:70000", ""):
        with pytest.raises(allow_list.AllowListError):
            allow_list.parse_rule(bad)


def test_request_heads() -> None:
    connect = netproxy.parse_head(b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443")
    assert connect is not None and (connect.host, connect.port, connect.head) == ("api.openai.com", 443, b"")
    plain = netproxy.parse_head(b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com\r\n"
                                b"Proxy-Connection: keep-alive")
    assert plain is not None and (plain.host, plain.port) == ("example.com", 8080)
    assert plain.head == b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
    bare = netproxy.parse_head(b"GET http://example.com HTTP/1.1")
    assert bare is not None and bare.head.startswith(b"GET / HTTP/1.1") and bare.port == 80
    assert netproxy.parse_head(b"GET /local HTTP/1.1") is None
    # The host is the agent's to write, and it reaches the user's terminal and config: a name or nothing.
    for forged in (b"CONNECT \x1b]52;c;aGk=\x07:443 HTTP/1.1", b"CONNECT a\nb.com:443 HTTP/1.1",
                   b"CONNECT xn--\xc3\xa9.com:443 HTTP/1.1", b"GET http://a..b/ HTTP/1.1"):
        assert netproxy.parse_head(forged) is None, forged
    assert netproxy.parse_head(b"GET https://x/ HTTP/1.1") is None


class _Hello(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """Two plain HTTP servers on 127.0.0.1 outside the sandbox, serving `tmp_path/site`."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello from outside\n")
    servers = []
    for _ in range(2):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                 lambda *a, **k: _Hello(*a, directory=str(site), **k))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield servers[0].server_address[1], servers[1].server_address[1], site
    for server in servers:
        server.shutdown()


def _bound_back_from_tmp() -> list[str]:
    """The venv and the source tree, where a clone under /tmp has them: the sandbox's /tmp is empty."""
    folders = dict.fromkeys([sys.prefix, str(Path(net_bridge.__file__).resolve().parents[2])])
    return [arg for folder in folders if Path(folder).is_relative_to("/tmp") for arg in ("--ro-bind", folder, folder)]


def _sandboxed(tmp_path: Path, allow: list[str], script: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    sock = tmp_path / "proxy.sock"
    events = tmp_path / "events.jsonl"
    proxy_url = "http://127.0.0.1:3128"
    env = {**os.environ, "http_proxy": proxy_url, "https_proxy": proxy_url, "ALL_PROXY": proxy_url,
           "HTTP_PROXY": proxy_url, "HTTPS_PROXY": proxy_url}
    env.pop("no_proxy", None)
    env.pop("NO_PROXY", None)
    argv = [sys.executable, "-m", "daintree_tui.core.netproxy", "--socket", str(sock), "--worktree", "w1",
            "--events", str(events), *[a for rule in allow for a in ("--allow", rule)], "--",
            "bwrap", "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", "--tmpfs", "/run", "--bind", str(sock), "/run/proxy.sock", "--tmpfs", "/tmp",
            "--bind", str(tmp_path), str(tmp_path), *_bound_back_from_tmp(), "--",
            sys.executable, "-I", net_bridge.__file__, "3128", "/run/proxy.sock", "--", "sh", "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
    recorded = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    return done, recorded


@needs_bwrap
def test_only_the_listed_host_answers_and_a_direct_connection_fails(tmp_path: Path,
                                                                    web: tuple[int, int, Path]) -> None:
    allowed, other, _ = web
    script = (f"curl -sS -m 10 http://127.0.0.1:{allowed}/hello.txt; echo allowed=$?; "
              f"curl -sS -m 10 -p http://127.0.0.1:{allowed}/hello.txt; echo tunnel=$?; "
              f"curl -sS -m 10 -f http://127.0.0.1:{other}/hello.txt; echo other=$?; "
              f"curl -sS -m 5 --noproxy '*' http://127.0.0.1:{allowed}/hello.txt; echo direct=$?; exit 3")
    done, events = _sandboxed(tmp_path, [f"127.0.0.1:{allowed}"], script)
    assert done.returncode == 3, done.stderr
    out = done.stdout
    assert out.count("hello from outside") == 2
    assert "allowed=0" in out and "tunnel=0" in out
    assert "other=22" in out  # 403 from the proxy (curl -f)
    assert "direct=7" in out  # nothing listens on the sandbox's own loopback
    assert [(e["event"], e["host"], e["port"], e["worktree"]["name"]) for e in events] == \
        [("sandbox.denied", "127.0.0.1", other, "w1")]


@needs_bwrap
def test_git_fetch_through_an_allowed_host(tmp_path: Path, web: tuple[int, int, Path]) -> None:
    allowed, _, site = web
    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    (origin / "f.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(origin), "add", "."], check=True)
    subprocess.run(["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"],
                   check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(site / "repo.git")], check=True)
    subprocess.run(["git", "-C", str(site / "repo.git"), "update-server-info"], check=True)
    clone = tmp_path / "clone"
    done, _ = _sandboxed(tmp_path, [f"127.0.0.1:{allowed}"],
                         f"git clone -q http://127.0.0.1:{allowed}/repo.git {clone} && git -C {clone} log --format=%s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "one"


def test_only_well_formed_denied_hosts_are_shown() -> None:
    from daintree_tui.core.sandbox.containment import denied_hosts

    records = [{"event": "sandbox.denied", "worktree": {"name": "w1"}, "host": host, "port": 443}
               for host in ("registry.npmjs.org", "\x1b]52;c;aGk=\x07", "a\nb", "::1")]
    records.append({"event": "sandbox.denied", "worktree": {"name": "w2"}, "host": "other.org", "port": 443})
    assert denied_hosts(records, "w1") == ["registry.npmjs.org:443", "[::1]:443"]

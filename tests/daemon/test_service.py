"""The service in-process: signal flags, the whole lifecycle on real repos, idle unload."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from tests.conftest import Repo, run_service, scaled, wait_for

from codechunkd.config import Settings, load_settings
from codechunkd.daemon.control import SourceSpec, request, write_sources
from codechunkd.daemon.embedder_lock import LockedEmbedder
from codechunkd.daemon.service import Service, capture_signals
from codechunkd.storage.lock import WriterLock


def test_signal_handlers_only_set_flags(settings: Settings) -> None:
    """SIGHUP asks for a reload, SIGINT for an exit, a second SIGINT forces it."""
    service = Service(settings)
    before = signal.getsignal(signal.SIGTERM)
    with capture_signals(service.handle_signal):
        signal.raise_signal(signal.SIGHUP)
        assert service.reload_requested
        assert not service.should_exit
        signal.raise_signal(signal.SIGINT)
        assert (service.should_exit, service.force_exit) == (True, False)
        signal.raise_signal(signal.SIGINT)
        assert service.force_exit
    assert signal.getsignal(signal.SIGTERM) is before


def test_idle_model_is_unloaded_and_reloaded_on_demand(embedder: Any) -> None:
    """After the idle timeout the model is dropped; the next text loads it again."""
    now = [100.0]
    locked = LockedEmbedder(embedder, slice_size=2, clock=lambda: now[0])
    vectors = locked.embed(["a", "b", "c"])
    assert vectors.shape == (3, locked.dimension)
    assert locked.loaded
    now[0] += 10
    assert not locked.unload_if_idle(60)
    now[0] += 60
    assert locked.unload_if_idle(60)
    assert not locked.loaded
    assert locked.embed(["d"]).shape == (1, locked.dimension)
    assert locked.loaded


@pytest.mark.slow
def test_service_lifecycle_in_process(repo: Repo, tmp_path: Path, index_dir: Path) -> None:
    """Start, follow an edit, SIGHUP picks up a new source (and, with ``sources.json``
    damaged, keeps the sources it serves and goes on), SIGTERM returns 0 and unlocks."""
    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.commit("init")
    other = Repo(tmp_path / "other")
    other.write("tool.py", "def other_tool_ibex():\n    return 'ibex'\n")
    other.commit("init")
    env = {"CODECHUNKD_DAEMON_DEBOUNCE_MS": "50", "CODECHUNKD_DAEMON_NICE": "0"}
    overrides = {"index.dir": str(index_dir)}
    settings = load_settings(env=env, overrides=overrides)
    service = Service(
        settings,
        specs=[SourceSpec.parse(str(repo.path))],
        load_settings=lambda: load_settings(env=env, overrides=overrides),
    )
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            wait_for(service.ready.is_set, "ready")
            sock = service.paths.socket

            def searchable(word: str) -> bool:
                query = {"cmd": "search", "query": "serve forever", "k": 20}
                hits = request(sock, query, timeout=scaled(30))["hits"]
                return any(word in h["content"] for h in hits)

            repo.write("app.py", "def serve_forever():\n    return 'second_gecko'\n")
            wait_for(lambda: searchable("second_gecko"), "the edit searchable")
            write_sources(service.paths.meta / "sources.json", [SourceSpec.parse(str(other.path))])
            os.kill(os.getpid(), signal.SIGHUP)
            wait_for(
                lambda: len(request(sock, {"cmd": "status"}, timeout=scaled(30))["sources"]) == 2,
                "the second source",
            )
            wait_for(
                lambda: all(
                    s["fresh"]
                    for s in request(sock, {"cmd": "status"}, timeout=scaled(30))["sources"]
                ),
                "both fresh",
            )
            (service.paths.meta / "sources.json").write_text('{"sources": [')  # cut short
            os.kill(os.getpid(), signal.SIGHUP)  # the reload keeps the sources it serves
            wait_for(lambda: "sources_list_damaged" in events_seen(), "the damage logged")
            assert len(request(sock, {"cmd": "status"}, timeout=scaled(30))["sources"]) == 2
            repo.write("app.py", "def serve_forever():\n    return 'third_heron'\n")
            wait_for(lambda: searchable("third_heron"), "an edit after the damage searchable")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    captured: list[list[Any]] = []

    def events_seen() -> list[str]:
        return [e["event"] for e in list(captured[0])]

    driver = threading.Thread(target=drive)
    with capture_logs() as logs:
        captured.append(logs)
        driver.start()
        code = service.run()
        driver.join(timeout=scaled(30))
    assert not errors, errors
    assert code == 0
    events = [e["event"] for e in logs]
    assert "daemon_ready" in events
    assert "reloaded" in events
    assert events[-1] == "daemon_stopped"
    synced = [e for e in logs if e["event"] == "sync_done"]
    assert len(synced) >= 3  # the start-up reconcile, the edit, the new source
    with WriterLock(service.paths.lock):  # released
        pass
    assert not service.paths.socket.exists()


def _reloadable(repo: Repo, index_dir: Path, env: dict[str, str]) -> Service:
    """A service of ``repo`` whose reload (SIGHUP) reads ``env`` again: a test edits it."""
    overrides = {"index.dir": str(index_dir)}
    return Service(
        load_settings(env=env, overrides=overrides),
        specs=[SourceSpec.parse(str(repo.path))],
        load_settings=lambda: load_settings(env=env, overrides=overrides),
    )


@pytest.mark.slow
def test_reload_with_a_new_exclude_removes_those_files_at_once(repo: Repo, index_dir: Path) -> None:
    """SIGHUP with a new ``files.exclude``: the excluded files leave the index without waiting
    for the periodic reconcile (five minutes by default)."""
    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.write("secret/keys.py", "def private_key_quokka():\n    return 'quokka'\n")
    repo.commit("init")
    env = {"CODECHUNKD_DAEMON_DEBOUNCE_MS": "50", "CODECHUNKD_DAEMON_NICE": "0"}
    service = _reloadable(repo, index_dir, env)

    def paths() -> set[str]:
        hits = request(
            service.paths.socket, {"cmd": "search", "query": "quokka", "k": 20}, timeout=scaled(30)
        )
        return {h["path"] for h in hits["hits"]}

    def drive() -> None:
        wait_for(service.ready.is_set, "ready")
        wait_for(lambda: "secret/keys.py" in paths(), "the file indexed")
        env["CODECHUNKD_FILES_EXCLUDE"] = "secret/*"
        os.kill(os.getpid(), signal.SIGHUP)
        wait_for(lambda: "secret/keys.py" not in paths(), "the excluded file gone")
        assert "app.py" in {
            h["path"]
            for h in request(
                service.paths.socket, {"cmd": "search", "query": "serve"}, timeout=scaled(30)
            )["hits"]
        }

    assert run_service(service, drive) == 0


@pytest.mark.slow
def test_a_reload_applies_a_reranker(repo: Repo, index_dir: Path) -> None:
    """SIGHUP with ``[rerank]`` newly set: the daemon's next searches are ordered by the
    server (docs/operations.md says a reload is enough), and a reload without it stops."""
    from tests.rerank_server import RerankServer

    repo.write("billing.py", "def compute_invoice_total(lines):\n    return sum(lines)\n")
    repo.write("art.py", "def stripes(n):\n    # zebra zebra\n    return n\n")
    repo.commit("init")
    env = {"CODECHUNKD_DAEMON_DEBOUNCE_MS": "50", "CODECHUNKD_DAEMON_NICE": "0"}
    service = _reloadable(repo, index_dir, env)

    def first() -> str:
        query = {"cmd": "search", "query": "compute the invoice total", "k": 2}
        hits = request(service.paths.socket, query, timeout=scaled(30))["hits"]
        return str(hits[0]["path"]) if hits else ""

    with RerankServer(word="zebra") as server:

        def drive() -> None:
            wait_for(service.ready.is_set, "ready")
            wait_for(lambda: first() == "billing.py", "the plain order")
            env.update(CODECHUNKD_RERANK_URL=server.url, CODECHUNKD_RERANK_MODEL="m")
            os.kill(os.getpid(), signal.SIGHUP)
            wait_for(lambda: first() == "art.py", "the reranked order")
            del env["CODECHUNKD_RERANK_URL"], env["CODECHUNKD_RERANK_MODEL"]
            os.kill(os.getpid(), signal.SIGHUP)
            wait_for(lambda: first() == "billing.py", "the plain order again")

        assert run_service(service, drive) == 0
    assert server.seen  # the reranked searches asked it


@pytest.mark.slow
def test_status_counts_the_searches_the_reranker_failed(repo: Repo, index_dir: Path) -> None:
    """`status` names the reranking server the daemon asks and counts the searches it
    failed, with the last reason (escaped): a failing reranker shows without a search."""
    from tests.rerank_server import RerankServer

    from codechunkd.daemon.status import render_text

    repo.write("billing.py", "def compute_invoice_total(lines):\n    return sum(lines)\n")
    repo.commit("init")
    with RerankServer() as server:
        env = {
            "CODECHUNKD_DAEMON_DEBOUNCE_MS": "50",
            "CODECHUNKD_DAEMON_NICE": "0",
            "CODECHUNKD_RERANK_URL": server.url,
            "CODECHUNKD_RERANK_MODEL": "m",
        }
        service = Service(
            load_settings(env=env, overrides={"index.dir": str(index_dir)}),
            specs=[SourceSpec.parse(str(repo.path))],
        )
        sock = service.paths.socket

        def rerank() -> dict[str, Any]:
            return dict(request(sock, {"cmd": "status"}, timeout=scaled(30))["daemon"]["rerank"])

        def search() -> dict[str, Any]:
            query = {"cmd": "search", "query": "invoice total", "k": 2}
            return dict(request(sock, query, timeout=scaled(30)))

        def drive() -> None:
            wait_for(service.ready.is_set, "ready")
            wait_for(lambda: bool(search()["hits"]), "the file searchable")
            assert rerank()["failed"] == 0
            assert rerank()["url"] == f"{server.url}/rerank"
            server.answer = lambda body: (500, b'{"error": "\x1b[2Jout of memory"}')
            assert "out of memory" in search()["note"]
            search()
            got = rerank()
            assert got["failed"] == 2 and "HTTP 500" in got["last_error"], got
            text = render_text(request(sock, {"cmd": "status"}, timeout=scaled(30)))
            assert "(model m), 2 searches ranked without it, last " in text, text
            assert "\\x1b[2Jout of memory" in text and "\x1b" not in text

        assert run_service(service, drive) == 0


@pytest.mark.slow
def test_daemon_runs_the_summary_job(repo: Repo, index_dir: Path) -> None:
    """With an endpoint configured, the scheduled job summarizes stale chunks (in the writer)."""
    from tests.chat_server import MODEL, ChatServer

    body = "\n".join(f"    total = total + value * {i}  # step {i} of the sum" for i in range(12))
    repo.write("calc.py", f"def weighted_total(values):\n    total = 0\n{body}\n    return total\n")
    repo.commit("init")
    with ChatServer() as chat:
        overrides = {
            "index.dir": str(index_dir),
            "summaries.url": chat.url,
            "summaries.model": MODEL,
            "summaries.min_tokens": 20,
            "summaries.concurrency": 1,
            "summaries.requests_per_minute": 0,
        }
        settings = load_settings(env={"CODECHUNKD_DAEMON_NICE": "0"}, overrides=overrides)
        service = Service(settings, specs=[SourceSpec.parse(str(repo.path))])
        errors: list[BaseException] = []

        def drive() -> None:
            try:
                sock = wait_for(lambda: service.ready.is_set() and service.paths.socket, "ready")

                def summaries() -> Any:
                    doc = request(sock, {"cmd": "status"}, timeout=scaled(30))["daemon"]
                    run = (doc["summaries"] or {}).get("last_run") or {}
                    return run.get("written") and doc["summary_backlog"] == 0

                wait_for(summaries, "the summary job to write")
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)

        driver = threading.Thread(target=drive)
        driver.start()
        code = service.run()
        driver.join(timeout=scaled(30))
        assert chat.requests >= 1
    assert not errors, errors
    assert code == 0


@pytest.mark.slow
def test_watch_limit_degrades_and_periodic_reconcile_keeps_it_fresh(
    repo: Repo, index_dir: Path
) -> None:
    """Short of watches: status says degraded (exit 11) and edits still arrive by reconcile."""
    from codechunkd.daemon.status import EXIT_DEGRADED, exit_code

    repo.write("app.py", "def first_version():\n    return 'one'\n")
    for i in range(12):
        repo.write(f"pkg{i}/mod.py", f"X{i} = {i}\n")
    repo.commit("init")
    env = {
        "CODECHUNKD_DAEMON_NICE": "0",
        "CODECHUNKD_DAEMON_MAX_WATCHES": "8",
        "CODECHUNKD_DAEMON_DEGRADED_RECONCILE_S": "1",
    }
    settings = load_settings(env=env, overrides={"index.dir": str(index_dir)})
    service = Service(settings, specs=[SourceSpec.parse(str(repo.path))])
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            sock = wait_for(lambda: service.ready.is_set() and service.paths.socket, "ready")
            doc = request(sock, {"cmd": "status"}, timeout=scaled(30))
            assert doc["daemon"]["state"] == "degraded"
            assert exit_code(doc) == EXIT_DEGRADED
            assert "fs.inotify.max_user_watches" in doc["sources"][0]["watcher"]["degraded"]
            repo.write("app.py", "def second_version():\n    return 'two_lynx'\n")
            wait_for(
                lambda: any(
                    "two_lynx" in h["content"]
                    for h in request(
                        sock,
                        {"cmd": "search", "query": "second version", "k": 30},
                        timeout=scaled(30),
                    )["hits"]
                ),
                "the edit indexed by the periodic reconcile",
            )
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    driver = threading.Thread(target=drive)
    driver.start()
    code = service.run()
    driver.join(timeout=scaled(30))
    assert not errors, errors
    assert code == 0


def test_socket_search_reads_the_one_search_request(
    repo: Repo, settings: Settings, indexer: Any, embedder: Any
) -> None:
    """The control socket's ``search`` parses ``SearchRequest``'s JSON: ``lang`` is an alias of
    ``language``, the client's ``to_json`` gets ``Index.run``'s hits, and a bad request (empty
    query, k out of range, an unknown option, a relative repo) gets a JSON error answer."""
    from codechunkd.daemon.control import ControlServer
    from codechunkd.storage.reader import Index
    from codechunkd.storage.request import SearchRequest
    from codechunkd.storage.store import IndexStore

    repo.write("geo.py", "def haversine(a, b):\n    return 'great circle distance'\n")
    repo.write("lib.rs", "fn haversine_rs() -> u32 {\n    42\n}\n")
    repo.commit("init")
    indexer.sync(repo.path)
    service = Service(settings)
    service.reader = IndexStore(service.paths.uri)
    service.embedder = LockedEmbedder(embedder)
    service.ready.set()
    server = ControlServer(service.paths.socket, {"search": service.search})
    server.start()
    try:
        sock = service.paths.socket

        def paths(doc: dict[str, Any]) -> list[str]:
            return [
                h["path"]
                for h in request(sock, {"cmd": "search", **doc}, timeout=scaled(30))["hits"]
            ]

        both = paths({"query": "haversine", "k": 10})
        assert set(both) == {"geo.py", "lib.rs"}
        assert paths({"query": "haversine", "lang": "python"}) == ["geo.py"]
        assert paths({"query": "haversine", "language": "python"}) == ["geo.py"]
        req = SearchRequest(query="great circle distance", k=3, repo=str(repo.path))
        answer = request(sock, {"cmd": "search", **req.to_json()}, timeout=scaled(30))
        direct = Index(service.reader, settings, embedder=embedder).run(req)
        assert [h["id"] for h in answer["hits"]] == [h.id for h in direct]
        assert answer["mode"] == "hybrid"
        for doc, says in [
            ({"query": "  "}, "the search query is empty"),
            ({"query": "x", "k": 0}, "k must be between 1 and 1000, got 0"),
            ({"query": "x", "colour": "red"}, "unknown search option 'colour'"),
            ({"query": "x", "repo": "rel/path"}, "repo must be an absolute path"),
            ({"query": "x", "lang": "python", "language": "rust"}, "conflicting values"),
        ]:
            assert says in request(sock, {"cmd": "search", **doc}, timeout=scaled(30))["error"]
    finally:
        server.stop()


@pytest.mark.slow
def test_after_ready_status_keeps_the_last_real_batch_and_counts_no_idle_degraded_run(
    repo: Repo, index_dir: Path
) -> None:
    """No-op reconciles after the first index leave status's last batch as that index's (its
    files, its truncated chunks), and ``jobs.degraded_reconcile`` counts no run while no
    source is degraded, though the job fires as often as the reconcile."""
    from codechunkd.daemon.status import render_text

    body = "".join(f"    value_{i} = compute_{i}(alpha, beta, gamma)\n" for i in range(30))
    repo.write("long.py", f"def long_function(alpha, beta, gamma):\n{body}    return alpha\n")
    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.commit("init")
    overrides = {
        "index.dir": str(index_dir),
        "daemon.reconcile_interval_s": 0.2,
        "daemon.degraded_reconcile_s": 0.2,
        "daemon.nice": 0,
    }
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])
    seen: dict[str, Any] = {}

    def drive() -> None:
        wait_for(service.ready.is_set, "the first index")
        assert service.upkeep is not None
        wait_for(
            lambda: sum(e["event"] == "sync_done" for e in logs) >= 4,
            "no-op reconciles after the first index",
        )
        seen["doc"] = service.status()

    with capture_logs() as logs:
        assert run_service(service, drive) == 0
    doc = seen["doc"]
    (source,) = doc["sources"]
    batch = source["last_batch"]
    assert (batch["added"], batch["truncated"]) == (2, 1), batch
    assert "1 chunk longer than the model's window" in render_text(doc)
    jobs = doc["daemon"]["jobs"]
    assert jobs["reconcile"]["runs"] >= 2, jobs
    assert jobs["degraded_reconcile"]["runs"] == 0, jobs


def test_status_says_which_files_are_not_indexed_and_why(repo: Repo, index_dir: Path) -> None:
    """`status` counts the files the daemon recorded without chunks, by reason, from the
    table: a lock file and a minified bundle; once the lock file is deleted, only the
    bundle is left in the count."""
    from codechunkd.daemon.status import render_text

    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.write("package-lock.json", '{"name": "app", "lockfileVersion": 3, "packages": {}}\n')
    repo.write("dist/app.min.js", "export function a(b){return b+1}\n")
    repo.commit("init")
    overrides = {"index.dir": str(index_dir), "daemon.nice": 0, "daemon.debounce_ms": 50}
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])
    seen: dict[str, Any] = {}

    def skipped() -> dict[str, int]:
        (source,) = service.status()["sources"]
        return dict(source.get("skipped") or {})

    def drive() -> None:
        wait_for(service.ready.is_set, "the first index")
        seen["before"] = service.status()
        (repo.path / "package-lock.json").unlink()
        repo.commit("no lock file")
        wait_for(lambda: skipped() == {"minified": 1}, "the lock file's row gone from the count")

    assert run_service(service, drive) == 0
    (source,) = seen["before"]["sources"]
    assert source["skipped"] == {"lockfile": 1, "minified": 1}
    assert source["files"] == 1
    assert "not indexed: lockfile 1, minified 1" in render_text(seen["before"])

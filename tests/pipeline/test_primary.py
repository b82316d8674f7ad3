"""Writes happen on the primary only: `index`, `rm`, `watch` and `reset` against a read replica's copy are refused,
naming the primary's store and the fix, and leave the published generations as they were."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from pipeline import publish as pub
from pipeline.primary import replica_of
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


def _published(workdir: Path, run_cli: RunCli) -> tuple[Path, Path]:
    """A primary under workdir/primary, indexed and published into workdir/shared: (its store file, shared)."""
    primary, shared = workdir / "primary", workdir / "shared"
    write_tree(primary, {f"docs/d{i}.md": f"# Doc {i}\n\nalpha beta word{i}\n" for i in range(3)})
    (primary / "knowledge.yaml").write_text(yaml.safe_dump({"knowledge": {
        "paths": ["docs"], "publish": {"directory": str(shared)}}}))
    code, out, err = run_cli("--config", str(primary / "knowledge.yaml"), "index", "--publish")
    assert code == 0 and pub.generations(shared) == [1], out + err
    return primary / "knowledge" / "default" / "knowledge.db", shared


def _config(where: Path, block: dict[str, object]) -> str:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "knowledge.yaml"
    path.write_text(yaml.safe_dump({"knowledge": block}))
    return str(path)


def _assert_refused(result: tuple[int, str, str], verb: str, source: Path) -> None:
    code, out, err = result
    assert code == 2, out + err
    assert f"knowledge {verb}: refused" in err and str(source) in err and "Traceback" not in err, err
    assert f"Run `knowledge {verb}` on the primary" in err and "knowledge publish" in err, err


def test_index_and_rm_against_a_published_generation_are_refused_naming_the_primary(
        workdir: Path, run_cli: RunCli) -> None:
    source, shared = _published(workdir, run_cli)
    generation = pub.generation_dir(shared, 1)
    before = sorted(p.name for p in generation.iterdir())
    config = _config(workdir / "replica", {"paths": ["docs"], "directory": str(generation)})
    write_tree(workdir / "replica", {"docs/x.md": "# X\n\nnew words\n"})
    _assert_refused(run_cli("--config", config, "index"), "index", source)
    _assert_refused(run_cli("--config", config, "rm", "docs/d0.md"), "rm", source)
    _assert_refused(run_cli("--config", config, "reset", "--force"), "reset", source)
    assert sorted(p.name for p in generation.iterdir()) == before  # nothing written beside the generation
    assert pub.verify(shared, 1).documents == 3


def test_a_store_directory_of_generations_is_refused(workdir: Path, run_cli: RunCli) -> None:
    source, shared = _published(workdir, run_cli)
    config = _config(workdir / "replica", {"paths": ["docs"], "directory": str(shared)})
    _assert_refused(run_cli("--config", config, "watch"), "watch", source)
    assert not (shared / "watch.lock").exists() and not (shared / "knowledge.db").exists()


def test_a_replica_host_without_a_store_of_its_own_is_refused(workdir: Path, run_cli: RunCli) -> None:
    source, shared = _published(workdir, run_cli)
    host = workdir / "replica-host"
    config = _config(host, {"paths": ["docs"], "publish": {"directory": str(shared)}})
    write_tree(host, {"docs/x.md": "# X\n\nnew words\n"})
    _assert_refused(run_cli("--config", config, "index"), "index", source)
    _assert_refused(run_cli("--config", config, "watch"), "watch", source)
    assert not (host / "knowledge").exists()  # no second store was started
    code, out, err = run_cli("--config", config, "index", "--dry-run")  # reading what would change is no write
    assert code == 0 and "would add 1" in out, out + err


def test_the_primary_itself_is_never_taken_for_a_replica(workdir: Path, run_cli: RunCli) -> None:
    source, shared = _published(workdir, run_cli)
    assert replica_of(source.parent, source, shared) is None
    source.unlink()  # the primary's store deleted to be built afresh: its own generations name it
    assert replica_of(source.parent, source, shared) is None
    config = str(workdir / "primary" / "knowledge.yaml")
    code, out, err = run_cli("--config", config, "index", "--publish")
    assert code == 0 and pub.generations(shared)[0] == 2, out + err

"""What the command line imports: each command pays for its own dependencies only.

Start-up is most of ``tracelens analyze`` on a small trace, so these check the import
structure in a fresh interpreter (never timings, which depend on the machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Never needed by the core's commands: the web layer and its stack, the recording side.
NEVER = ("web", "litestar", "uvicorn", "sqlalchemy", "jinja2", "torch")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules)


def test_importing_the_cli_loads_no_command() -> None:
    modules = _modules_after("import tracelens.cli")
    assert _loaded(modules, NEVER) == []
    heavy = ("duckdb", "numpy", "rich", "rich.markdown", "ingest", "tracelens.report")
    assert _loaded(modules, heavy) == []


def test_analyze_to_json_loads_neither_renderers_nor_web(planted_trace: tuple[Path, dict]) -> None:
    path, _ = planted_trace
    modules = _modules_after(
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracelens.cli import main\n"
        f"r = CliRunner().invoke(main, ['analyze', {str(path)!r}, '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
    )
    assert "ingest" in modules  # it did analyze the trace
    assert _loaded(modules, NEVER) == []
    assert _loaded(modules, ("rich", "markdown_it", "pygments")) == []


def test_help_lists_the_plugged_in_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for name in ("analyze", "diff", "thresholds", "schema", "serve"):
        assert f"  {name} " in done.stdout


def test_help_imports_no_command() -> None:
    modules = _modules_after(
        "from tracelens.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    heavy = ("duckdb", "numpy", "rich", "ingest", "tracelens.report", "tracelens.analyzers")
    assert _loaded(modules, heavy) == []
    assert not any(
        m.startswith("tracelens.cli.")
        # the group itself: lazy loading, and the one-line out-of-memory error (click only)
        and m not in {"tracelens.cli.lazy_group", "tracelens.cli.out_of_memory"}
        for m in modules
    )

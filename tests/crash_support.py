"""A fork server for the kill tests: `python -m tests.crash_support` imports Loupe once,
then runs one job per JSON line on stdin in a forked child and SIGKILLs the child's process
group after the job's delay. Interpreter start-up and imports (a second or more on two
cores) are paid once, so each random kill moment lands in the work itself, and ten trials
per case stay cheap.

A job is `{"launch": [...argv]}` (a `launch.py` command) or `{"script": path, "argv": [...]}`,
with `"delay"` (seconds after the fork; absent: run to the end) and `"log"` (file for the
child's stdout and stderr). The answer is one JSON line:
`{"rc": exit code (-9 when killed), "killed": bool, "seconds": float}`.

`ForkServer` is the test side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRIALS = int(
    os.environ.get("LOUPE_CRASH_TRIALS", "6")
)  # kill trials per case (CI: 6; more for a deeper run)


def _child(job: dict[str, Any]) -> int:
    os.setpgid(0, 0)  # its own group: a kill takes its worker processes too
    log = os.open(job.get("log") or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        if "launch" in job:
            import launch

            return int(launch.main(list(job["launch"])) or 0)
        import runpy

        sys.argv = [job["script"], *job.get("argv", [])]
        runpy.run_path(job["script"], run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve() -> None:
    # What the jobs import, loaded before any fork (none of it starts a thread).
    import datasets  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import agent.policies.rules  # noqa: F401
    import annotate.export  # noqa: F401
    import annotate.intake.ingest  # noqa: F401
    import annotate.vetting.into_store  # noqa: F401
    import annotate.vetting.runner  # noqa: F401
    import commands.ingest  # noqa: F401
    import commands.vet  # noqa: F401
    import db.store  # noqa: F401
    import launch  # noqa: F401

    out = sys.stdout
    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os._exit(_child(job))
        delay, killed = job.get("delay"), False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if delay is not None and time.monotonic() - t0 >= delay:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
                killed = True
                break
            time.sleep(0.002)
        rc = os.waitstatus_to_exitcode(status)
        out.write(json.dumps({"rc": rc, "killed": killed, "seconds": time.monotonic() - t0}))
        out.write("\n")
        out.flush()


class ForkServer:
    """Runs jobs in `python -m tests.crash_support`; one job at a time."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_support"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, delay: float | None = None, log: Path | None = None, **job: Any) -> dict:
        job = {**job, "delay": delay, "log": str(log) if log else None}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit {self.proc.wait()})")
        return json.loads(line)

    def ok(self, log: Path | None = None, **job: Any) -> dict:
        """Run a job to the end; it must succeed (the log's tail is shown if not)."""
        res = self.run(None, log, **job)
        if res["rc"] != 0:
            tail = Path(log).read_text()[-2000:] if log and Path(log).exists() else ""
            raise AssertionError(f"job {job} exited {res['rc']}:\n{tail}")
        return res

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


if __name__ == "__main__":
    serve()

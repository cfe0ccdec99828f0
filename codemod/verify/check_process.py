"""The comparison with torch (opinfo_check) in a child process, so no kernel can take the tool down with it.

The check runs torch's own kernels and the bypass on generated calls; some of torch's internal kernels do not
validate their inputs (`_convert_indices_from_csr_to_coo` on crow indices that disagree with col indices) and die
by a signal. In codemod's own process that ended the command with no line of ours. Here the child says, in a file
of events, each call it is about to make and on which side (torch's kernel, or the bypass), flushed before the call:
- the bypass killed by a signal is a verdict, VerificationFailed naming the call;
- torch's own kernel killed by a signal leaves nothing to compare on that call: the child is started again, told to
  skip it, and the report names it (the calls are made again the same: the samples are seeded and kept);
- a child silent for HANG_SECONDS after a call began (LOADING_SECONDS before the first) hangs: killed,
  VerificationFailed naming the call and the side it was running.
`Checker.start` starts the child early (`codemod build` does as it starts compiling), so it imports torch and the
check while the parent compiles; the parent imports neither.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from codemod.model.errors import BadInput, CodemodError, VerificationFailed
from codemod.model.native_yaml import OpGroup
from codemod.verify.check_events import BYPASS, TORCH, Witness, last_event
from codemod.verify.check_report import CheckReport

# A call this long without a word from the child hangs (one takes milliseconds); before its first call (importing torch
# and PyTorch's OpInfos, making the op's samples: seconds, many more on a loaded machine), LOADING_SECONDS.
HANG_SECONDS = 300
LOADING_SECONDS = 900
# Torch's kernel killed on this many calls: the op's generated calls are not ones it can take; stop starting again.
MAX_TORCH_CRASHES = 16
# Signals a process gets from another (the out-of-memory killer, a user), never from a kernel's own fault.
_FROM_OUTSIDE = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Checker:
    """The child process that runs the check, ended when the block ends whatever happened."""

    def __enter__(self) -> Checker:
        self._scratch = tempfile.TemporaryDirectory(prefix="codemod-check-")
        self._child: subprocess.Popen | None = None
        return self

    def start(self) -> None:
        """Start the child now, before `check` needs it (it then has imported torch and the check)."""
        if self._child is None:
            self._child = self._spawn()

    def __exit__(self, *_exc) -> None:
        self._end()
        self._scratch.cleanup()

    def _spawn(self) -> subprocess.Popen:
        log = open(Path(self._scratch.name) / "output.txt", "w")  # noqa: SIM115  (the child holds it)
        with log:
            return subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=log,
                                    stderr=subprocess.STDOUT, text=True)

    def _end(self) -> None:
        if self._child is not None and self._child.poll() is None:
            self._child.kill()
            self._child.wait()
        self._child = None

    def check(self, op: str, library: Path, groups: Sequence[OpGroup]) -> CheckReport:
        """OP's bypass in LIBRARY checked against torch on its structured GROUPS in the child: its report, with the
        calls torch's own kernel died on named; VerificationFailed when the bypass died."""
        scratch = Path(self._scratch.name)
        skipped: dict[int, list[str]] = {}
        while True:
            child = self._child or self._spawn()
            self._child = None
            events, result = scratch / f"events-{len(skipped)}.jsonl", scratch / f"result-{len(skipped)}.json"
            request = {"op": op, "library": str(library), "groups": [g.schemas for g in groups], "skipped": skipped,
                       "events": str(events), "result": str(result)}
            try:
                child.stdin.write(json.dumps(request))
                child.stdin.close()
                silent = _silent_for(child, events)  # the seconds it was silent for, once too long
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            if silent is not None:
                step, who, description, variant = last_event(events)
                running = {BYPASS: f"the bypass, in {variant},", TORCH: f"torch's own kernel, in {variant},"}.get(who, "the check")
                where = f"on {description}" if step else "before its first call (loading the bypass or making the samples)"
                raise VerificationFailed(f"{op}: {running} did not return in {silent} s {where}")
            if child.returncode == 0 and result.is_file():
                return _report(json.loads(result.read_text()))
            if child.returncode >= 0:
                output = self._output()
                last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
                raise RuntimeError(f"the check's process failed (exit {child.returncode}): {last}\n{output}")
            killed = signal.Signals(-child.returncode).name
            step, who, description, variant = last_event(events)
            if -child.returncode in _FROM_OUTSIDE:  # no kernel raises these on itself: say what ran, blame nothing
                raise VerificationFailed(
                    f"{op}: the check's process was killed by {killed} from outside (the out-of-memory killer, or a user) "
                    f"while {who} ran {variant or 'its first call'} on {description or 'its first call'}: nothing was "
                    "compared there; run the command again")
            if step == 0:
                raise VerificationFailed(f"{op}: the check's process was killed by {killed} before its first call "
                                         f"(loading {library} or making the samples):\n{self._output()}")
            if who == BYPASS:
                raise VerificationFailed(f"{op}: the bypass was killed by {killed} in {variant}, on {description}")
            if who != TORCH:
                raise VerificationFailed(f"{op}: the check was killed by {killed} between the calls of {description}")
            skipped[step] = [description, f"{description} (torch's own kernel was killed by {killed} in {variant})"]
            if len(skipped) > MAX_TORCH_CRASHES:
                raise VerificationFailed(
                    f"{op}: torch's own kernel was killed by a signal on {len(skipped)} of the check's calls, the last "
                    f"{description} ({killed}): the generated calls are not ones this op's kernel validates; nothing "
                    "to compare the bypass with")

    def _output(self) -> str:
        return (Path(self._scratch.name) / "output.txt").read_text(errors="replace")[-4000:]


def _silent_for(child: subprocess.Popen, events: Path) -> int | None:
    """Wait for CHILD to end (None); or, once it has said nothing in EVENTS for HANG_SECONDS (LOADING_SECONDS before its
    first word), the seconds it was silent for, CHILD still running."""
    said, since = 0, time.monotonic()
    while True:
        try:
            child.wait(timeout=1)
            return None
        except subprocess.TimeoutExpired:
            size = events.stat().st_size if events.is_file() else 0
            limit = HANG_SECONDS if size else LOADING_SECONDS
            if size != said:
                said, since = size, time.monotonic()
            elif time.monotonic() - since > limit:
                return limit


def _report(result: dict) -> CheckReport:
    if "refused" in result:
        refusal = VerificationFailed if result["refused"]["verdict"] else BadInput
        raise refusal(result["refused"]["message"])
    return CheckReport.from_json(result["report"])


def _serve() -> None:
    """The child: read the request, run the check, write its report (or the refusal of our own it raised)."""
    from codemod.verify import extension, opinfo_check, samples

    request = json.loads(sys.stdin.read())
    skipped = {int(step): said for step, said in request["skipped"].items()}
    with open(request["events"], "w") as events:
        try:
            module = extension.import_module(Path(request["library"]))
            groups = [samples.group_from(schemas) for schemas in request["groups"]]
            report = opinfo_check.check(module, request["op"], groups, Witness(events, skipped))
            result = {"report": report.to_json()}
        except CodemodError as refused:
            result = {"refused": {"verdict": isinstance(refused, VerificationFailed), "message": str(refused)}}
    Path(request["result"]).write_text(json.dumps(result))


if __name__ == "__main__":
    _serve()

"""What a check of a bypass against torch found (opinfo_check runs it, in a child process: check_process).

Plain data, without torch, so the parent reads the child's report without importing torch; `to_json` and
`from_json` carry it across.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from codemod.model.errors import VerificationFailed


@dataclass(frozen=True)
class Failure:
    overload: str
    variant: str  # "functional", "out= (resized)", "in-place", ...
    call: str  # Call.describe()
    what: str

    def __str__(self) -> str:
        return f"{self.overload} {self.variant}, {self.call}: {self.what}"


@dataclass
class CheckReport:
    op: str
    dtypes: list[str]
    checked: Counter = field(default_factory=Counter)  # overload -> comparisons
    returned: Counter = field(default_factory=Counter)  # overload -> comparisons where both returned a result
    both_raise: int = 0
    calls_by_source: Counter = field(default_factory=Counter)  # "OpInfo", "schema", "edge" -> calls
    inplace_skipped: int = 0  # OpInfo samples that broadcast self
    failures: list[Failure] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)  # overloads not compared, each with why
    skipped_samples: list[str] = field(default_factory=list)  # OpInfo sample generators that raised, each with why
    # calls torch's own kernel was killed by a signal on (it does not validate what was generated): nothing to compare
    torch_killed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing disagreed, and something was compared or what was not is named."""
        return not self.failures and (sum(self.checked.values()) > 0 or bool(self.unchecked))

    def require_ok(self) -> None:
        """Raise VerificationFailed (exit 1) naming the first failing call, unless every comparison agreed."""
        if not self.ok:
            first = self.failures[0] if self.failures else "no comparison was made"
            raise VerificationFailed(f"{self.op}: the bypass disagrees with torch on {len(self.failures)} of "
                                     f"{sum(self.checked.values())} comparisons; the first: {first}")

    def summary(self) -> str:
        per_overload = ", ".join(f"{name} {count}" for name, count in self.checked.items())
        sources = ", ".join(f"{count} {source}" for source, count in self.calls_by_source.items())
        reasons: dict[str, list[str]] = {}
        for overload, why in self.unchecked.items():
            reasons.setdefault(why, []).append(overload)
        not_checked = "".join(f"; not checked: {', '.join(names)} ({why})" for why, names in reasons.items())
        errors_only = [name for name in self.checked if not self.returned[name]]
        if errors_only:  # no sample torch accepts: what was compared is that both paths refuse the same calls
            not_checked += f"; compared on errors only (torch raised on every call): {', '.join(errors_only)}"
        if self.skipped_samples:  # PyTorch's generator raised: checked on the samples it made before
            not_checked += f"; OpInfo samples skipped, their generator raised: {'; '.join(self.skipped_samples)}"
        if self.torch_killed:  # the bypass calls the same kernel: those calls were not made on it either
            not_checked += (f"; not compared on {len(self.torch_killed)} calls torch's own kernel was killed on, "
                            f"the first: {self.torch_killed[0]}")
        return (f"{self.op}: {sum(self.checked.values())} comparisons with torch ({per_overload}); calls: {sources}; "
                f"dtypes {', '.join(self.dtypes)}; {self.both_raise} where both raise; "
                f"{self.inplace_skipped} in-place skipped (the sample broadcasts self); {len(self.failures)} failed"
                f"{not_checked}")

    def to_json(self) -> dict:
        # not dataclasses.asdict: it rebuilds a Counter from (key, count) pairs, counting the pairs
        said = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**said, "failures": [dataclasses.asdict(f) for f in self.failures]}

    @classmethod
    def from_json(cls, said: dict) -> CheckReport:
        counters = {name: Counter(said[name]) for name in ("checked", "returned", "calls_by_source")}
        return cls(**{**said, **counters, "failures": [Failure(**f) for f in said["failures"]]})


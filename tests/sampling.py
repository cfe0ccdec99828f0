"""One seed per test session for the tests that check a sample of an exhaustive property (every pair of ops, every
signature class, every layout, every crash point) instead of all of it.

The seed is `pytest --sample-seed N`, else $CODEMOD_TEST_SEED, else drawn at random: a different sample each run,
printed in pytest's header and under each failed sampled test, so `--sample-seed N` replays the run. Each
parametrization draws from its own stream of that seed (seeded by the seed and what it draws from), so a test run
alone draws what it drew in the whole suite. `pytest --sample-all` (what benchmarks/exhaustive.py runs) takes every
item instead, and the hypothesis tests' larger budget.

A pytest plugin: tests/conftest.py loads it.
"""
from __future__ import annotations

import os
import random
import shlex
from collections.abc import Callable, Mapping, Sequence

import hypothesis
import pytest

SEED_ENV = "CODEMOD_TEST_SEED"  # set for the whole session: xdist workers and subprocesses draw the same
ALL_ENV = "CODEMOD_TEST_SAMPLE_ALL"


def seed() -> int:
    """The session's seed: drawn once, then kept in the environment."""
    if SEED_ENV not in os.environ:
        os.environ[SEED_ENV] = str(random.SystemRandom().randrange(10**6))
    return int(os.environ[SEED_ENV])


def every_item() -> bool:
    """Whether this is a --sample-all session."""
    return os.environ.get(ALL_ENV) == "1"


def examples(per_run: int, exhaustive: int, **options) -> Callable:
    """A hypothesis test's settings (OPTIONS): PER_RUN examples in the suite, EXHAUSTIVE under --sample-all, drawn from
    the session's seed (so `--sample-seed N` draws them again); marked `sampled`, so benchmarks/exhaustive.py runs it."""
    budget = exhaustive if every_item() else per_run

    def mark(test: Callable) -> Callable:
        drawn = hypothesis.seed(seed())(hypothesis.settings(max_examples=budget, **options)(test))
        return pytest.mark.sampled(examples=budget)(drawn)

    return mark


def draw(population: Sequence | Mapping[str, Sequence], k: int) -> list:
    """K items of POPULATION drawn with the session's seed, in the order drawn (every item, shuffled, under
    --sample-all). A mapping is classes of items: K of each class."""
    if isinstance(population, Mapping):
        return [item for name, members in population.items() for item in draw_from(members, k, name)]
    return draw_from(population, k, "")


def draw_from(members: Sequence, k: int, name: str) -> list:
    rng = random.Random(f"{seed()}:{name}:{list(members)!r}")  # str seeds hash stably, whatever PYTHONHASHSEED is
    return rng.sample(list(members), len(members) if every_item() else min(k, len(members)))


def parametrize(
    argnames: str | Sequence[str], population: Sequence | Mapping[str, Sequence], k: int, *, together: bool = False,
    ids: Callable[[object], str] | None = None,
) -> Callable:
    """pytest.mark.parametrize over `draw(POPULATION, K)`: one case per item, or TOGETHER one case of the drawn items
    (a random subset in a random order). Failed cases name the seed and the sample."""
    drawn = draw(population, k)
    size = sum(map(len, population.values())) if isinstance(population, Mapping) else len(population)
    cases = [tuple(drawn)] if together else drawn
    name = ids or (lambda case: "-".join(map(str, case)) if isinstance(case, tuple) else str(case))

    def mark(test: Callable) -> Callable:
        test = pytest.mark.parametrize(argnames, cases, ids=[name(case) for case in cases])(test)
        return pytest.mark.sampled(drawn=[name(item) for item in drawn], of=size)(test)

    return mark


# ---------------------------------------------------------------- the plugin's hooks

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sampling", "sampled exhaustive properties")
    group.addoption("--sample-seed", type=int, help=f"the seed of every sample (default: ${SEED_ENV}, else random)")
    group.addoption("--sample-all", action="store_true", help="every item of each sample, hypothesis's larger budget")


def pytest_configure(config: pytest.Config) -> None:
    # before the test modules are collected: they draw their samples as they are imported
    if config.getoption("sample_seed") is not None:
        os.environ[SEED_ENV] = str(config.getoption("sample_seed"))
    if config.getoption("sample_all"):
        os.environ[ALL_ENV] = "1"
    seed()
    config.addinivalue_line("markers", "sampled(drawn, of): parametrized over a sample drawn with the session's seed")
    config.addinivalue_line("markers", "sampled(examples): a hypothesis test with a budget per run and a larger one")


def pytest_report_header(config: pytest.Config) -> str:
    taken = "every item (--sample-all)" if every_item() else "a sample"
    return f"sample seed: {seed()} ({taken}; `--sample-seed {seed()}` draws the same)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    sampled = item.get_closest_marker("sampled")
    if report.failed and sampled is not None and "drawn" in sampled.kwargs:  # hypothesis prints its own replay
        drawn = sampled.kwargs["drawn"]
        report.sections.append(("sample", (
            f"drawn with sample seed {seed()}: {len(drawn)} of {sampled.kwargs['of']}: {', '.join(drawn)}\n"
            f"replay: python -m pytest --sample-seed {seed()} {shlex.quote(item.nodeid)}"
        )))
    return report

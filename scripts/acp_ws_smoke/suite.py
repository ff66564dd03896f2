"""Runs the checks one by one under a time limit, prints one line per outcome and the summary."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from .client import Check, CheckFailed, Skipped, Target
from .protocol import builtin_without_model
from .sections import QUOTED_BY_BUILTIN


@dataclass
class Outcome:
    """One check's result as printed: PASS, FAIL or SKIP, and what it saw or why."""

    section: str
    name: str
    status: str  # PASS, FAIL, SKIP
    detail: str


class Suite:
    """Runs the checks one at a time, each under its own limit, and prints a line per outcome (the key masked) and
    the summary; whether the pod's agent has a model is probed at most once per run."""

    def __init__(self, target: Target, *, skip_model: bool, check_timeout: float) -> None:
        self.target = target
        self.skip_model = skip_model
        self.check_timeout = check_timeout
        self.outcomes: list[Outcome] = []
        self._no_model: str | None = None
        self._probed = False

    async def run(self, section: str, name: str, check: Check, *, model: bool = False) -> None:
        if model and self.skip_model:
            self.report(Outcome(section, name, "SKIP", "needs a model that follows instructions "
                                                       "(--skip-model-checks)"))
            return
        if model and check not in QUOTED_BY_BUILTIN and (why := await self.no_model()) is not None:
            self.report(Outcome(section, name, "SKIP", why))
            return
        limit = self.check_timeout + (self.target.long_timeout if model else self.target.prompt_timeout)
        try:
            async with asyncio.timeout(limit):
                detail = await check(self.target)
            outcome = Outcome(section, name, "PASS", detail)
        except Skipped as exc:
            outcome = Outcome(section, name, "SKIP", str(exc))
        except CheckFailed as exc:
            outcome = Outcome(section, name, "FAIL", str(exc))
        except TimeoutError:
            outcome = Outcome(section, name, "FAIL", f"did not finish within {limit:g} s")
        except ConnectionClosed as exc:
            outcome = Outcome(section, name, "FAIL", f"the gateway closed the connection ({exc})")
        except (OSError, InvalidHandshake) as exc:
            outcome = Outcome(section, name, "FAIL", f"cannot connect: {type(exc).__name__}: {exc}")
        self.report(outcome)

    async def no_model(self) -> str | None:
        """Why the model checks cannot pass here, once per run: the pod's own built-in agent with no model behind
        it follows no free-form instruction. Any other agent, or a probe that goes wrong, lets the checks run
        (and say what they find)."""
        if not self._probed:
            self._probed = True
            with contextlib.suppress(CheckFailed, TimeoutError, ConnectionClosed, OSError, InvalidHandshake):
                async with asyncio.timeout(self.check_timeout + self.target.prompt_timeout):
                    self._no_model = await builtin_without_model(self.target)
        return self._no_model

    def report(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        detail = outcome.detail.replace(self.target.token, "<key>") if self.target.token else outcome.detail
        print(f"{outcome.status}  [{outcome.section}] {outcome.name}: {detail}", flush=True)

    def summary(self) -> bool:
        print()
        sections: dict[str, list[Outcome]] = {}
        for outcome in self.outcomes:
            sections.setdefault(outcome.section, []).append(outcome)
        for section, outcomes in sections.items():
            ran = [o for o in outcomes if o.status != "SKIP"]
            passed = sum(o.status == "PASS" for o in ran)
            skipped = len(outcomes) - len(ran)
            print(f"{section:<22} {passed}/{len(ran)}" + (f" ({skipped} skipped)" if skipped else ""))
        ran = [o for o in self.outcomes if o.status != "SKIP"]
        passed = sum(o.status == "PASS" for o in ran)
        print(f"RESULT: {passed}/{len(ran)} checks passed")
        return passed == len(ran)

"""A scriptable, real-HTTP simulated provider of long-running jobs (SPEC §5).

Each job is created with a *script* naming the failure mode it exhibits
(lost create response, 429 storms, cancel races, duplicate webhooks...), so the
reconciler can be proven against every one of them over real HTTP.
"""

from shared.simulator.app import build_app, main_async
from shared.simulator.clock import Clock
from shared.simulator.scripts import Script
from shared.simulator.settings import SimulatorSettings

__all__ = ["Clock", "Script", "SimulatorSettings", "build_app", "main_async"]

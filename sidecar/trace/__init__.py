"""Persisted per-resource event logs (jobs, agent runs, benchmark runs) and their push subscriptions."""

from .eventlog import EventListener, EventLog, EventWriter
from .models import TERMINAL_EVENTS, StoredEvent

__all__ = ["TERMINAL_EVENTS", "EventListener", "EventLog", "EventWriter", "StoredEvent"]

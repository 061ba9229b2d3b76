"""Plugins (phase-2 §7): manifest, install/uninstall, settings, secrets, command contributions."""

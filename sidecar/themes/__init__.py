"""Theme packages (phase-2 §11): inspection, install, enable; exporters read the enabled theme CSS."""

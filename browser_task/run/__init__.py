"""Running one job: prepare, execute its steps, end it; interactive sessions; step handlers."""

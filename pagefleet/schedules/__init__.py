"""Recurring and one-off jobs: schedule records mirrored as EventBridge Scheduler schedules,
and the schedule expressions they fire on."""

"""Browser sessions: a job that takes its steps one at a time from a person or an agent."""

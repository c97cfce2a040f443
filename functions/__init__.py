"""Lambda entry points: parse the event, call one service function, respond."""

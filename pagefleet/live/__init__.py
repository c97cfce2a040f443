"""Live runs: run events (stored per job), WebSocket connections and rooms, live delivery."""

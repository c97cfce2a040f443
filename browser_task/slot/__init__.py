"""The slot's loop: receive, admit, claim, keep the lease, complete; the worker's slots."""

"""First-token latency per warmup path; see ``trio_agent/cli/_bench/`` (also ``trio-agent bench``)."""

from trio_agent.cli._bench._command import main

if __name__ == "__main__":
    raise SystemExit(main())

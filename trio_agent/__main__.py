from _trio_agent_launch import main  # the warm daemon's thin client, else the CLI in-process

raise SystemExit(main())

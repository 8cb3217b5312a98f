import sys; from dmlops.bench import main; sys.exit(main())  # noqa: E401,E702  (python -m dmlops.bench)

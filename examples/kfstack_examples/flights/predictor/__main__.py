from kfstack_examples.flights.predictor.server import main

raise SystemExit(main())

from kfstack.components.serving.predictor.server import main

raise SystemExit(main())

"""From a drift alert to a retraining run: a receiver for Alertmanager's webhook
(``kfstack alert-receiver``).

A firing ``KfstackLiveDrift`` alert (labels ``namespace``, ``inference_service``) starts one
run of the retraining recorded for that model, with a ``trigger`` parameter saying why, at most
one run per model at a time and none within a cooldown of the last one an alert started. One
module per concern: :mod:`~kfstack.app.alert_receiver.notification` (the webhook body),
:mod:`~kfstack.app.alert_receiver.decisions` (the rules, the log line),
:mod:`~kfstack.app.alert_receiver.cluster` (recurring runs and runs on the KFP API),
:mod:`~kfstack.app.alert_receiver.embedded` (run directories of local runs) and
:mod:`~kfstack.app.alert_receiver.server` (HTTP, the token).
"""

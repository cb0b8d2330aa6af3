"""Serving the trained model: the predictor (a KServe model server) and, around it, deployment."""

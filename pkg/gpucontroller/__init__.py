"""gpu-controller's controllers (Deployment, leader-elected): today ``physicalgpu``."""

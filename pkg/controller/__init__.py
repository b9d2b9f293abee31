"""The controller framework: informers, stores, workqueues, controllers, reconcilers, manager."""

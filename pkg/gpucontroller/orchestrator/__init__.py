"""The orchestrator of ``gpu-controller``: the node
components' DaemonSets, rendered from one configuration document.

The document (``api.gpu.v1alpha1.GPUOperatorConfig``) lives under ``config.yaml`` of a ConfigMap
in the namespace the node components run in (``--components-namespace``, named by
``--operator-config``). A pass:

1. parses it (``internal/handler/parse``): a broken document is a Warning Event on the ConfigMap
   and changes nothing, so a typo never tears the node components down;
2. renders the DaemonSet of every enabled component (``render/``) and server-side applies each
   one as field manager ``gpu-controller`` with the ConfigMap as controlling owner
   (``internal/handler/apply``). An apply restates the whole intent every pass: a field someone
   edited by hand is taken back, an unchanged DaemonSet is not touched (the server sees no change,
   so no rollout);
3. deletes the DaemonSets it owns whose component the document no longer enables
   (``internal/handler/prune``).

Deleting the ConfigMap (``helm uninstall``) lets the garbage collector delete every DaemonSet it
owns, and their Pods. Nodes are chosen by labels gpu-controller keeps on them (``nodelabels``), so
nothing here depends on the cluster's nodes.
"""

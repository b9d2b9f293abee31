"""The kubelet plugin's side of gpu-handler: NodePrepareResources and NodeUnprepareResources.

Two pipelines of steps run on the framework's StepTaker (:mod:`.prepare_steps`,
:mod:`.unprepare_steps`), declared once in the composition root (:mod:`.setup`); one release order
(:mod:`.release`) shared by a failed Prepare's rollback, Unprepare and start-up (:mod:`.startup`,
through Prepare's undos); each device kind owns its plan, record, conflict rule, prepare and
release in :mod:`.kinds`, one module or package per kind. The node's record of what is prepared is
the checkpoint (:mod:`.checkpoint`), read and written only through
:class:`~.checkpoint.CheckpointStore` under the node lock.
"""

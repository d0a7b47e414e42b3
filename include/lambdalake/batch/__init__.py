"""The batch layer: recomputing a view's slices from bronze (``recompute``), publishing
them and the high-water marks (``publication``), finding late rows and restating their
windows (``late_arrivals``, ``restatement``), and the batch DAG's steps (``steps``).
Beside the speed layer, above the view definitions both share (``lambdalake.views``);
quality, serving and operations import it, never the streams."""

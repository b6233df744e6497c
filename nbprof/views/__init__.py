"""What users see: the timeline, the diagnosis panel, the text and HTML reports, the gauge.

Views read a :class:`~nbprof.Profile` (trace, diagnosis, samples) and never compute
metrics. Bokeh, ipywidgets and IPython are imported inside the functions that draw.
"""

"""The report exports' database side: the statements that render CSV lines and XLSX
cells (``sql``), and how each dialect streams them (``sqlite``, ``postgresql``)."""

"""Every hot SQL statement, as SQLAlchemy Core bulk statements, grouped by subject.

The ORM is for few-row paths only (DESIGN.md decision 7).
"""

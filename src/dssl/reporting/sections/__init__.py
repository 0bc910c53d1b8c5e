"""Report sections, one module per paper table or figure (registry ``SECTIONS``, ``create_section``).

Importing this package registers every section; a new table is one module with a
``@register_section`` :class:`ReportSection` subclass, imported here, and a name in
``report.sections`` of params.yaml.
"""

from dssl.reporting.sections import (  # noqa: F401  (registration)
    comparison, fig2a, fig3, learning_curve, notes, pretraining_gain, table1, table5,
)
from dssl.reporting.sections.base import (
    FIGURES,
    FOLDER,
    SECTIONS,
    ReportContext,
    ReportSection,
    SectionOutput,
    check_report_params,
    check_sections_or_raise,
    create_section,
    register_section,
)

__all__ = ["FIGURES", "FOLDER", "SECTIONS", "ReportContext", "ReportSection", "SectionOutput", "check_report_params",
           "check_sections_or_raise", "create_section", "register_section"]

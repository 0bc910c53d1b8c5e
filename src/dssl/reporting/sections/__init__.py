"""Report sections, one module per paper table or figure, named after the section it registers (registry
``SECTIONS``, ``create_section``).

Importing this package registers every section; a new table is one module with a
``@register_section`` :class:`ReportSection` subclass, imported here, and a name in
``report.sections`` of params.yaml. Tables that compare strategies of one model subclass
``strategy_comparison.StrategyComparison``, whose rows and columns ``comparison_layout`` parses, whose claim
``comparison_claim`` checks and whose texts ``comparison_text`` writes.
"""

from dssl.reporting.sections import (  # noqa: F401  (registration)
    fedema, fedema_lambda, fedssl_ema, fedssl_methods, fedssl_predictor, fedssl_stop_gradient, fig2a, fig2b, fig3,
    learning_curve, notes, pretraining_gain, table1, table2, table5, table6, table7, table8,
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

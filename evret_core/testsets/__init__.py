"""Test sets generated from a corpus: questions with expected answers (and aliases), their source documents, a
question type, and quality filters whose counts are reported (see :mod:`evret_core.testsets.testset`)."""

from evret_core.testsets.filters import FilterReport, apply_filters
from evret_core.testsets.sampling import Sample, stratified_sample
from evret_core.testsets.testset import GeneratedSet, TestsetGenerator

__all__ = ["FilterReport", "GeneratedSet", "Sample", "TestsetGenerator", "apply_filters", "stratified_sample"]

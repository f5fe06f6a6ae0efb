"""toolloop test suite: unit, property, scenario and integration tests."""

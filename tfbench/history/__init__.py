"""The results history: every result in one store, series, change points and the fleet."""

"""Helpers of the unit tier, by the folder of the tests that own them."""

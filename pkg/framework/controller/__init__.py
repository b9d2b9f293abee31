"""Controllers: workers over a queue, fed by watches of informers and sources through predicates
and request mappers; the builder assembles one and adds it to the manager."""

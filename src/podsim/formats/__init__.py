"""Front doors: readers and writers of other tools' files.  They produce workloads and
machine descriptions and know nothing of the engine."""

"""The catalogue: what a cell can be made of, declared once. Precisions, the optimizers of
the training scenarios, and the recipe registry, which collects the recipes each framework
declares in its own folder (dlbench.frameworks.<name>.recipes)."""

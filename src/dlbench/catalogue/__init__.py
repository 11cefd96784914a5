"""The catalogue: what a cell can be made of, declared once. The frameworks (what each
declares in its folder's `about` module, and the registered ones) and the matrix's axes,
precisions, the optimizers of the training scenarios, the models, and the recipe registry,
which collects the recipes each framework declares in its own folder
(dlbench.frameworks.<name>.recipes)."""

"""Datasets: upload prompt files, list, read and delete them."""

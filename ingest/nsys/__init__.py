"""The Nsight Systems SQLite-export reader: tables by name, from nsys 2020.3 to 2026.x."""

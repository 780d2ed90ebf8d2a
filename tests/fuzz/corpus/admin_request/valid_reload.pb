
m/models/m.yaml
from neuron_monitor.cli import main

main()

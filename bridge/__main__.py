from bridge.cli import main

main()
